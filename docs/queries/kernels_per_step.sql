-- Kernels per training step: the kernels of the step's process that
-- started during each step, and the GPU time of its kernels within the
-- step (a kernel that runs past the step's end counts there up to that
-- end), beside the step's length.  Steps are the slices of the "steps"
-- track (the report's steps); kernels are the slices of the process's
-- "GPU <device> stream <stream> (context <c>)" tracks that are not copies
-- or memsets.
with steps as (
  select s.id, s.name, s.ts, s.ts + s.dur as e, pt.upid
  from slice s
  join track t on t.id = s.track_id
  left join process_track pt on pt.id = s.track_id
  where t.name = 'steps'
),
kernels as (
  select s.ts, s.ts + s.dur as e, pt.upid
  from slice s join process_track pt on pt.id = s.track_id
  where pt.name glob 'GPU * stream *' and s.name not glob 'Memcpy *' and s.name != 'Memset'
)
select st.name as step,
       round((st.e - st.ts) / 1e6, 3) as step_ms,
       coalesce(sum(k.ts >= st.ts and k.ts < st.e), 0) as kernels,
       round(coalesce(sum(min(k.e, st.e) - max(k.ts, st.ts)), 0) / 1e6, 3) as kernel_ms
from steps st
left join kernels k
  on (st.upid is null or k.upid = st.upid) and k.ts < st.e and k.e > st.ts
group by st.id
order by st.ts;

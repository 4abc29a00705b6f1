-- Kernels per training step: the kernels that ran on the GPU during each
-- step (started before its end, ended after its start), their GPU time
-- within the step, and the step's length.  Steps are the slices of the
-- "steps" track (the report's steps); kernels are the slices of the
-- "GPU <device> stream <stream> (context <c>)" tracks that are not copies
-- or memsets.
with steps as (
  select s.id, s.name, s.ts, s.dur
  from slice s join track t on t.id = s.track_id
  where t.name = 'steps'
),
kernels as (
  select s.ts, s.dur
  from slice s join track t on t.id = s.track_id
  where t.name glob 'GPU * stream *' and s.name not glob 'Memcpy *' and s.name != 'Memset'
)
select st.name as step,
       round(st.dur / 1e6, 3) as step_ms,
       count(k.ts) as kernels,
       round(coalesce(sum(min(k.ts + k.dur, st.ts + st.dur) - max(k.ts, st.ts)), 0) / 1e6, 3)
         as kernel_ms
from steps st
left join kernels k on k.ts < st.ts + st.dur and k.ts + k.dur > st.ts
group by st.id
order by st.ts;

-- GPU idle time per training step: the step's length less the time at
-- least one kernel, copy or memset of the step's process ran on a GPU
-- (work on several streams at once counts once), and the longest idle
-- stretch in the step.
with work as (
  select s.ts, s.ts + s.dur as e, pt.upid
  from slice s join process_track pt on pt.id = s.track_id
  where pt.name glob 'GPU * stream *'
),
ordered as (
  select ts, e, upid,
         max(e) over (partition by upid order by ts, e
                      rows between unbounded preceding and 1 preceding) as before
  from work
),
numbered as (
  select ts, e, upid,
         sum(case when before is null or ts > before then 1 else 0 end)
           over (partition by upid order by ts, e rows unbounded preceding) as island
  from ordered
),
busy as (select upid, min(ts) as ts, max(e) as e from numbered group by upid, island),
steps as (
  select s.id, s.name, s.ts, s.ts + s.dur as e, pt.upid
  from slice s
  join track t on t.id = s.track_id
  left join process_track pt on pt.id = s.track_id
  where t.name = 'steps'
),
busy_in_step as (
  select st.id, max(b.ts, st.ts) as ts, min(b.e, st.e) as e
  from steps st
  join busy b on (st.upid is null or b.upid = st.upid) and b.ts < st.e and b.e > st.ts
),
gaps as (
  -- idle stretches: from the step's start or the end of one busy stretch to
  -- the next busy stretch or the step's end
  select st.id,
         coalesce(lead(bs.ts) over (partition by st.id order by bs.ts), st.e) - bs.e as gap
  from steps st join busy_in_step bs on bs.id = st.id
  union all
  select st.id, coalesce((select min(ts) from busy_in_step bs where bs.id = st.id), st.e) - st.ts
  from steps st
),
per_step as (
  select st.id, st.name, st.ts, st.e - st.ts as dur,
         coalesce((select sum(e - ts) from busy_in_step bs where bs.id = st.id), 0) as busy,
         (select max(gap) from gaps g where g.id = st.id) as longest
  from steps st
)
select name as step,
       round(dur / 1e6, 3) as step_ms,
       round(busy / 1e6, 3) as gpu_busy_ms,
       round((dur - busy) / 1e6, 3) as gpu_idle_ms,
       round(longest / 1e6, 3) as longest_idle_ms
from per_step
order by ts;

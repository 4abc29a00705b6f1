-- GPU idle time per training step: the step's length less the time at
-- least one kernel, copy or memset ran on any GPU (work of several streams
-- at once counts once), and the longest idle stretch in the step.
with work as (
  select s.ts, s.ts + s.dur as e
  from slice s join track t on t.id = s.track_id
  where t.name glob 'GPU * stream *'
),
ordered as (
  select ts, e, max(e) over (order by ts, e rows between unbounded preceding and 1 preceding) as before
  from work
),
numbered as (
  select ts, e,
         sum(case when before is null or ts > before then 1 else 0 end)
           over (order by ts, e rows unbounded preceding) as island
  from ordered
),
busy as (select min(ts) as ts, max(e) as e from numbered group by island),
steps as (
  select s.id, s.name, s.ts, s.ts + s.dur as e
  from slice s join track t on t.id = s.track_id
  where t.name = 'steps'
),
busy_in_step as (
  select st.id, max(b.ts, st.ts) as ts, min(b.e, st.e) as e
  from steps st join busy b on b.ts < st.e and b.e > st.ts
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
)
select st.name as step,
       round((st.e - st.ts) / 1e6, 3) as step_ms,
       round(coalesce((select sum(e - ts) from busy_in_step bs where bs.id = st.id), 0) / 1e6, 3)
         as gpu_busy_ms,
       round((st.e - st.ts - coalesce((select sum(e - ts) from busy_in_step bs where bs.id = st.id), 0))
             / 1e6, 3) as gpu_idle_ms,
       round((select max(gap) from gaps g where g.id = st.id) / 1e6, 3) as longest_idle_ms
from steps st
order by st.ts;

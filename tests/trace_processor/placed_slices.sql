-- Slices and instants by where they are: a thread (its own track and the
-- tracks under it: "<tid> OS", "<tid> off-CPU", "<tid> overlap"), the
-- process's own track ("(process)"), or a named track of a process or of
-- the whole trace (GPU streams, NVTX ranges, CUDA sync waits, steps, attach
-- window).  The Perfetto export ties child tracks to their thread; the
-- Chrome JSON puts them on made-up tids named after the thread.
with placed as (
  select s.name, s.dur, tr.name as track_name, t.tid, t.name as thread_name,
         coalesce(tp.pid, pp.pid) as pid, coalesce(tp.name, pp.name) as process_name
  from slice s
  join track tr on tr.id = s.track_id
  left join thread_track tt on tt.id = s.track_id
  left join thread t on t.utid = tt.utid
  left join process tp on tp.upid = t.upid
  left join process_track pt on pt.id = s.track_id
  left join process pp on pp.upid = pt.upid
),
owned as (
  select name, dur,
         -- 0x7ffffff0: the Chrome JSON's process of tracks of no process
         case when pid = 2147483632 then 0 else coalesce(pid, 0) end as pid,
         case when tid between 1 and 1073741823 then tid
              when tid >= 1073741824 and thread_name glob '[0-9]* *'
                then cast(substr(thread_name, 1, instr(thread_name, ' ') - 1) as int)
              else 0 end as tid,
         case when tid between 1 and 1073741823 then ''
              when tid >= 1073741824 and thread_name glob '[0-9]* *' then ''
              when tid >= 1073741824 then thread_name
              when track_name is null or track_name = process_name then '(process)'
              else track_name end as track
  from placed
)
select pid, tid, track, name, count(*) as n, sum(dur) as total_dur
from owned
group by pid, tid, track, name
order by pid, tid, track, name;

-- Every real thread with its process: pid, tid, names.  Chrome JSON has
-- only (pid, tid) to place a track, so the export gives tracks that are not
-- a thread made-up tids from 2^30 up; they are not threads.
select p.pid as pid, t.tid as tid, coalesce(t.name, '') as thread_name,
       coalesce(p.name, '') as process_name
from thread t
join process p using (upid)
where t.tid between 1 and 1073741823
order by pid, tid;

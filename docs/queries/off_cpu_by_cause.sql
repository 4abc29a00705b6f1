-- Off-CPU time per thread and cause: the "<tid> off-CPU" tracks' slices
-- are named "off-CPU (<cause>)": preempted, futex, syscall, page fault.
select p.pid, t.tid, t.name as thread,
       substr(s.name, 10, length(s.name) - 10) as cause,
       count(*) as intervals,
       round(sum(s.dur) / 1e6, 3) as off_cpu_ms,
       round(sum(extract_arg(s.arg_set_id, 'debug.runqueue_ns')) / 1e6, 3) as runqueue_ms
from slice s
join thread_track tt on tt.id = s.track_id
join thread t using (utid)
left join process p using (upid)
where s.name glob 'off-CPU (*)'
group by t.utid, s.name
order by off_cpu_ms desc;

-- The longest munmap calls, with the thread, the address and length
-- unmapped (each call is a slice on its thread's "<tid> OS" track).
select p.pid, t.tid, t.name as thread,
       s.ts,
       round(s.dur / 1e3, 1) as dur_us,
       printf('0x%x', extract_arg(s.arg_set_id, 'debug.addr')) as addr,
       extract_arg(s.arg_set_id, 'debug.length') as bytes
from slice s
join thread_track tt on tt.id = s.track_id
join thread t using (utid)
left join process p using (upid)
where s.name = 'munmap'
order by s.dur desc
limit 10;

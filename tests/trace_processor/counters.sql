-- Counter tracks by name with their process (0: none) and how many values.
-- The Chrome JSON importer names a counter "<name> <arg>" ("... value").
select coalesce(p.pid, 0) as pid, ct.name as name, count(c.id) as n_values
from counter_track ct
left join process_counter_track pct on pct.id = ct.id
left join process p on p.upid = pct.upid
left join counter c on c.track_id = ct.id
group by ct.id
order by pid, name;

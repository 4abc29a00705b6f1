-- Slices of one track must nest or be apart: a child within its parent,
-- siblings (same track, same parent) one after the other; no slice left
-- open (dur -1).
with sib as (
  select s.id, s.ts,
         max(s.ts + s.dur) over (partition by s.track_id, s.parent_id order by s.ts, s.id
                                 rows between unbounded preceding and 1 preceding) as prev_end
  from slice s
)
select
  (select count(*) from slice c join slice p on p.id = c.parent_id
   where c.ts < p.ts or c.ts + c.dur > p.ts + p.dur) as child_outside_parent,
  (select count(*) from sib where prev_end > ts) as sibling_overlaps,
  (select count(*) from slice where dur < 0) as unfinished;

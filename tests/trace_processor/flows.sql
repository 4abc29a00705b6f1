-- Flows of the CUDA side (an end on a CUDA API call, a sync wait or GPU
-- work): each must leave a CUDA API call on a thread and arrive at GPU work
-- (a GPU stream's kernel, copy or memset, or a sync wait) of the same
-- process with the same correlation id; each piece of GPU work gets at
-- most one.  Other flows (between OS slices) are counted apart.
with corr as (
  select s.id, s.track_id, s.category,
         coalesce(extract_arg(s.arg_set_id, 'debug.correlation_id'),
                  extract_arg(s.arg_set_id, 'args.correlation_id')) as correlation_id
  from slice s
),
ends as (
  select f.slice_out, f.slice_in,
         co.correlation_id as out_id, ci.correlation_id as in_id,
         co.category as out_category, ci.category as in_category,
         tto.utid as out_utid, po.upid as out_upid,
         coalesce(ti.name, tri.name) as in_track, coalesce(thi.upid, pti.upid) as in_upid
  from flow f
  join corr co on co.id = f.slice_out
  join corr ci on ci.id = f.slice_in
  left join thread_track tto on tto.id = co.track_id
  left join thread po on po.utid = tto.utid
  left join track tri on tri.id = ci.track_id
  left join thread_track tti on tti.id = ci.track_id
  left join thread thi on thi.utid = tti.utid
  left join thread ti on ti.utid = tti.utid and ti.tid >= 1073741824
  left join process_track pti on pti.id = ci.track_id
),
cuda as (
  select * from ends
  where out_category in ('cuda', 'gpu') or in_category in ('cuda', 'gpu')
)
select
  (select count(*) from cuda) as flows,
  (select count(*) from cuda
   where out_category = 'cuda' and out_utid is not null and out_id is not null and out_id = in_id
     and in_upid = out_upid
     and (in_track glob 'GPU * stream *' or in_track = 'CUDA sync waits')) as launch_to_gpu,
  (select count(distinct slice_in) from cuda) as gpu_work_with_flow,
  (select count(*) from (select slice_in from cuda group by slice_in having count(*) > 1))
    as gpu_work_with_several,
  (select count(*) from flow) - (select count(*) from cuda) as other_flows;

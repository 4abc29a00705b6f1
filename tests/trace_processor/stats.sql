-- Import problems: every stat with a value, and the ones the checks name
-- (info-severity ones included), so that a renamed stat is noticed too.
select name, coalesce(idx, '') as idx, severity, source, value
from stats
where value > 0
   or name in ('misplaced_end_event', 'track_event_parser_errors',
               'track_event_tokenizer_errors', 'track_event_thread_invalid_end',
               'tokenizer_skipped_packets', 'track_hierarchy_missing_uuid',
               'clock_sync_failure', 'process_tracker_errors')
order by name, idx;

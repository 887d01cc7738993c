-- The tally's update trigger (0018) joins the statement's old and new rows. PL/pgSQL plans a
-- statement once per connection and keeps the plan, and a statement without parameters keeps
-- the first one: planned for the transition tables of the first update the connection made (one
-- settled sample), a nested loop, which on a bulk decision of 25,000 samples read one table
-- again for every row of the other, from a file once it passed work_mem. The scale benchmark's
-- bulk approval ran for minutes on a pooled connection; in psql, 2,000 samples took 2.6 s after
-- a few one-sample updates in the same session and 0.4 s in a new one. Now that statement is
-- planned at each run (EXECUTE), for the sizes it has.
CREATE OR REPLACE FUNCTION sample_tally_deltas() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO sample_tally (run_id, state, finish_reason, review_state, reviewed_by, category, flags, n)
        SELECT s.run_id, s.state, s.finish_reason, s.review_state, s.reviewed_by, d.category,
               tally_flags(s.flags, s.auto_flags), count(*)
        FROM new_rows s LEFT JOIN dataset_rows d ON d.id = s.row_id
        GROUP BY 1, 2, 3, 4, 5, 6, 7;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO sample_tally (run_id, state, finish_reason, review_state, reviewed_by, category, flags, n)
        SELECT s.run_id, s.state, s.finish_reason, s.review_state, s.reviewed_by, d.category,
               tally_flags(s.flags, s.auto_flags), -count(*)
        FROM old_rows s LEFT JOIN dataset_rows d ON d.id = s.row_id
        GROUP BY 1, 2, 3, 4, 5, 6, 7;
    ELSE
        -- Most updates (lease renewals, the search text, token ids) move no sample to another
        -- key: they add nothing.
        -- EXECUTE plans the statement anew each time, for the sizes of this statement's
        -- transition tables (below).
        EXECUTE $sql$
        INSERT INTO sample_tally (run_id, state, finish_reason, review_state, reviewed_by, category, flags, n)
        SELECT m.run_id, m.state, m.finish_reason, m.review_state, m.reviewed_by, d.category, m.flags, sum(m.n)
        FROM (
            SELECT o.run_id, o.row_id, o.state, o.finish_reason, o.review_state, o.reviewed_by,
                   tally_flags(o.flags, o.auto_flags) AS flags, -1 AS n
            FROM old_rows o JOIN new_rows s ON s.id = o.id
            WHERE (o.run_id, o.row_id, o.state, o.finish_reason, o.review_state, o.reviewed_by, o.flags, o.auto_flags)
                  IS DISTINCT FROM (s.run_id, s.row_id, s.state, s.finish_reason, s.review_state, s.reviewed_by, s.flags, s.auto_flags)
            UNION ALL
            SELECT s.run_id, s.row_id, s.state, s.finish_reason, s.review_state, s.reviewed_by,
                   tally_flags(s.flags, s.auto_flags), 1
            FROM old_rows o JOIN new_rows s ON s.id = o.id
            WHERE (o.run_id, o.row_id, o.state, o.finish_reason, o.review_state, o.reviewed_by, o.flags, o.auto_flags)
                  IS DISTINCT FROM (s.run_id, s.row_id, s.state, s.finish_reason, s.review_state, s.reviewed_by, s.flags, s.auto_flags)
        ) AS m LEFT JOIN dataset_rows d ON d.id = m.row_id
        GROUP BY 1, 2, 3, 4, 5, 6, 7
        HAVING sum(m.n) <> 0
        $sql$;
    END IF;
    RETURN NULL;
END $$;


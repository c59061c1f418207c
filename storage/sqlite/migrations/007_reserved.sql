-- 007_reserved: a number held for a change made beside this one; it changes
-- nothing, and the file that holds that change replaces it.
SELECT 1;

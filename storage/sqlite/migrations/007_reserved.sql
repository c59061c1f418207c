-- 007_reserved: no change. The number is held for a migration of its own;
-- a store that applied this file has nothing to undo.
SELECT 1;

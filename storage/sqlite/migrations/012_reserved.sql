-- 012_reserved: version 12 holds no change in this build; its place is kept so
-- that 013 follows without a gap. It is replaced by the change numbered 12.

SELECT 1;

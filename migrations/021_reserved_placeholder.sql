-- 021: held for the branch that takes migration 021; this placeholder only keeps the
-- numbering without gaps until that branch lands (the integrator deletes this file then).
SELECT 1;

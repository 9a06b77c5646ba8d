SELECT d.name FROM databases AS d

# scripts/chaos's pieces: real processes (procs), the measuring clients (probes), the attackers
# (attacks), the fault matrix (scenarios) and the table (report).

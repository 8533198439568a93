"""The running daemon: poll, diff and record (the tick), deliver the outbox, the runner
that schedules and supervises it all, and what it tells about itself (metrics, /healthz,
/readyz). See docs/ARCHITECTURE.md, "Poll" and "Threads"."""

"""The patchwork CI bot (`patchbench bot`): one small module per job.

patchwork  REST client (events, series, checks, mbox), back-off and rate limits
store      state database (SQLite or PostgreSQL) with migrations; the outbox of checks and mails
pipeline   one series through apply → check → build/boot, as `check`/`run` do; the checks to post
pages      static HTML per series and per patch
replies    reply mail, 0-day-robot style (SMTP, or a maildir for a dry run)
driver     the loop: poll → work → drain
"""

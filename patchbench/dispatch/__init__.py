"""Stage 4: dispatch build and boot jobs for an applied series (see jobs.py for the data)."""

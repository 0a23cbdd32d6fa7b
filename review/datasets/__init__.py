"""Datasets: what comes in (`sources`, one importer per format), what goes out
(`export`), and the invented demo data (`demo`, `demo_rubrics`)."""

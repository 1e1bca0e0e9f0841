"""Running a suite: jobs, threads and scoring, batches, the response cache, early stops."""

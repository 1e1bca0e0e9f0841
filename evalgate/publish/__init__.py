"""Publishing: the GitHub client (comments, artefacts, checks, the data branch)."""

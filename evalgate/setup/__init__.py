"""Setting evalgate up in a repository: init, detection, doctor."""

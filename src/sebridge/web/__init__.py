"""The daemon's one HTTP server, the approval page behind its links, and the WSGI types."""

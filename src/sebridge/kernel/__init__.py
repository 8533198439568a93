"""The shared kernel: small concepts every integration and the core need, written once.

One concept per module (clock, backoff, retry_after, redact, worker, http_client). The
kernel imports only the standard library (and urllib3, in the one HTTP client), so
anything in sebridge may depend on it and it on nothing of sebridge's.
"""

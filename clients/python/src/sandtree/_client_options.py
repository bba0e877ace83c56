"""prime_sandboxes' client options that sandtree's clients take and check."""

from __future__ import annotations

from typing import Any, Dict, Optional

# prime_sandboxes 0.5.1's defaults.
OUTPUT_CONCURRENCY = 20
OUTPUT_QUEUE_SIZE = 200
OUTPUT_CACHE_BYTES = 64 << 20


def check_output_limits(concurrency: int, queue_size: int, cache_bytes: int) -> None:
    """prime_sandboxes bounds its background job output reads (concurrent reads, queued reads, cached
    bytes). sandtree's server returns a job's output with its status, so the clients read one job at a
    time, queue nothing and cache nothing: any valid bound holds. Invalid ones are refused alike."""
    if concurrency <= 0:
        raise ValueError("background_job_output_concurrency must be positive")
    if queue_size <= 0:
        raise ValueError("background_job_output_queue_size must be positive")
    if cache_bytes < 0:
        raise ValueError("background_job_output_cache_bytes must be non-negative")


def api_kw(api_client: Optional[Any], kw: Dict[str, Any]) -> None:
    if api_client is not None and kw:
        raise ValueError(f"give api_client, or the options of a new one ({', '.join(sorted(kw))}), not both")

"""The twin's step loop on its clock: requests, scheduler, KV pool, radix cache, speculative decoding, metrics."""

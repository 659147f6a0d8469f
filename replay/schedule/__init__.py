"""When each request goes out: the open-loop loop, sessions, shards and their rendezvous."""

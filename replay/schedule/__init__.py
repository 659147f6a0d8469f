"""When each request goes out: the open-loop loop, its clock, sessions, shards and their rendezvous."""

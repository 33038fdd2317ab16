"""The lease queue: service, partitions, backends."""

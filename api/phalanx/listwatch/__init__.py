"""One list-and-watch for every Phalanx component that follows objects on the API server: the
operator (its jobs' pods and Leases), the API service (its cache of every TrainingJob) and job
control (one job's changes). `protocol` holds what the stream means (paged lists, bookmarks, a
fresh list on 410), once; `aio` and `sync` only carry it."""

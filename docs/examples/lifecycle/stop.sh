weir stop clicks --savepoint

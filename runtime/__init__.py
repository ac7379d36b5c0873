"""runtime: the pure TrainJob → objects pipeline (map to be written)."""

"""Model adapters behind small protocols; ``tiny`` and ``paper`` profiles build the same classes."""

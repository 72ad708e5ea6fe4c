"""The base floor: cache, memo and row stores, safe file writes, weights identity, hub rules and the
device decision. Nothing here imports a model, a generator, an option or a family.
"""

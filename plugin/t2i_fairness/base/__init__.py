"""The base floor: what models and generators may use.

Content-addressed cache (:mod:`~t2i_fairness.base.cache`), its memo and row stores
(:mod:`~t2i_fairness.base.memo`, :mod:`~t2i_fairness.base.rowstore`), safe file writes
(:mod:`~t2i_fairness.base.files`), model weights identity (:mod:`~t2i_fairness.base.identity`), the
hub download rules (:mod:`~t2i_fairness.base.hub`) and the device decision
(:mod:`~t2i_fairness.base.devices`). Nothing here imports a model, a generator, an option or a
family: :mod:`t2i_fairness.spine` (workbench, generation, options, plan) sits above the generators
and uses this floor.
"""

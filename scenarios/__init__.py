"""The KIP suite, shipped in the wheel as ``pytest_elr.scenarios`` (a link to the checkout's ``scenarios/``):
``pytest --pyargs pytest_elr.scenarios`` runs it from an install. Data only: nothing here is imported."""

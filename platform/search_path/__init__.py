"""The search path, in the order a search takes it (docs/search-path.md): ``resolution`` resolves
the spec once into the plans of ``plans``, ``inputs`` prepares the base encoder and the corpus,
``tuner`` runs the trials through Ray Tune (handing each round to ``listeners``); what they
establish is ``platform.results``'s."""

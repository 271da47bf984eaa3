"""A ledger-mapping file (--ledger): its rules (which kernels an entry names, rules) and the shapes it gives
(shapes). The join itself, which prices and classifies the matched rows, is nsroof.roofs.ledger_join."""

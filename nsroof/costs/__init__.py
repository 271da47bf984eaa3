"""Stage 3, costs: what each op has to do, from its shapes. The analytic ledger (ledger/: formulas, the aten
op map, engine ops, collectives, your own @nsroof.formula), the ledger-mapping file's join rules
(ledger_map/), and the one way analytic costs reach a kernel (costing: the attribution rule, the ops table
priced once per distinct call, the analytic rows filled into the quantities)."""

"""The evidence: run records (typed models), the store of every lesson's runs, the atomic writer,
units and quantities. Imports nothing from the other stages."""

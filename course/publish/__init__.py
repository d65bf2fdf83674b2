"""`course publish`: the site built for its real address, checked, then deployed.

pipeline.py   the address, the build, the checks, the copies, then the deploy (`publish`)
links.py      the link check of a built site: internal links and anchors, external listed
compress.py   the precompressed copies (.gz, .br) beside each text file
deploy.py     a folder, or a git branch with ghp-import
command.py    the command line (kept light: the stages are imported when it runs)
"""

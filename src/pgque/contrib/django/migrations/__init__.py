"""One migration per pgque version: each installs pgque or upgrades an older install."""

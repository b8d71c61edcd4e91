"""Orders: placed by a view, confirmed by mail from a pgque consumer."""

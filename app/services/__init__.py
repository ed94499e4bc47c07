"""Logic shared by the HTML routers and the JSON API."""

"""The API's interactive docs at `/docs`: Swagger UI from files shipped in this package, never a CDN."""

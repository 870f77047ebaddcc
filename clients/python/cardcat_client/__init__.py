"""cardcat-client: a typed Python client for the cardcat trading-card catalog API.

from cardcat_client import CardcatClient

with CardcatClient("http://127.0.0.1:8000", api_key="cc_...") as cat:
    for card in cat.cards(q="charizard", limit=100):
        print(card.id, card.name, card.score)
"""

from cardcat_client import models
from cardcat_client.async_client import AsyncCardcatClient
from cardcat_client.client import CardcatClient
from cardcat_client.errors import CardcatConnectionError, CardcatError, WebhookVerificationError
from cardcat_client.webhooks import verify_webhook

__all__ = [
    "AsyncCardcatClient",
    "CardcatClient",
    "CardcatConnectionError",
    "CardcatError",
    "WebhookVerificationError",
    "models",
    "verify_webhook",
]

"""EndTxn (key 26), versions 0-5; flexible from 3. # message defs: EndTxnRequest.json

v5 (KIP-890 part 2, transaction.version 2): the coordinator bumps the producer epoch at the end of
every transaction and answers the producer id and the new epoch.
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, INT64, STRING, Field, message

END_TXN_REQUEST = message(
    "EndTxnRequest",
    26,
    "0-5",
    "3+",
    Field("transactional_id", STRING),
    Field("producer_id", INT64),
    Field("producer_epoch", INT16),
    Field("committed", BOOL),
)

END_TXN_RESPONSE = message(
    "EndTxnResponse",
    26,
    "0-5",
    "3+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("producer_id", INT64, versions="5+", default=-1),
    Field("producer_epoch", INT16, versions="5+", default=-1),
)

EndTxnRequest = build_message(END_TXN_REQUEST, __name__)
EndTxnResponse = build_message(END_TXN_RESPONSE, __name__)

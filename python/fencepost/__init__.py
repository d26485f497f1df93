"""fencepost: the Python client of the fencepost fencing proxy.

Values with fencing tokens and preconditions and fenced side effects (data
port), fences, leases, leader election and watches (admin port). Standard
library only.
"""

from fencepost._http import Response, encode_key
from fencepost.client import (EFFECT_METHODS, MAX_TOKEN, BatchResult, Client,
                              DeleteOp, EffectResult, Fence, LeaseInfo,
                              OpResult, PutOp, Value, WriteResult, check_token,
                              effect_target)
from fencepost.elector import LeaderElector, NotElected
from fencepost.errors import (PROBLEM_CLASSES, BadFraming, BadKey, BadRequest,
                              BadResponse, BodyTooLarge, DiskFull,
                              EffectInProgress, EffectOutcomeUnknown,
                              ElectionUnavailable, FenceElected, FenceHeld,
                              FencepostError, FenceStoreUnavailable,
                              HeadersTooLarge, IdempotencyKeyReused, Internal,
                              InvalidToken, KeyCollision, LeadershipLost,
                              LeaseHeld, LeaseNotHeld, MapFull,
                              MethodNotAllowed, MissingEffectHeader,
                              MissingToken, NotFound, Overloaded,
                              PreconditionFailed, Problem, StaleToken,
                              StorageFailure, StoreError, TokensExhausted,
                              TooManyConnections, TooManyLeases, Unauthorized,
                              Unreachable, UnverifiedToken, UpstreamFailed,
                              UpstreamOutcomeUnknown, problem_from_response)
from fencepost.lease import Lease, default_holder_id
from fencepost.watch import Event, Watch

__version__ = "0.1.0"

__all__ = [
    "Client", "Value", "WriteResult", "Fence", "LeaseInfo", "PutOp",
    "DeleteOp", "OpResult", "BatchResult", "EffectResult", "EFFECT_METHODS",
    "effect_target", "Response", "MAX_TOKEN",
    "check_token", "encode_key", "Lease", "default_holder_id",
    "LeaderElector", "NotElected", "Watch", "Event",
    "FencepostError", "Unreachable", "BadResponse", "LeadershipLost",
    "Problem", "problem_from_response", "PROBLEM_CLASSES",
    "StaleToken", "MissingToken", "InvalidToken", "BadKey", "BadRequest",
    "BadFraming", "BodyTooLarge", "HeadersTooLarge", "MethodNotAllowed",
    "NotFound", "Unauthorized", "Overloaded", "LeaseHeld", "LeaseNotHeld",
    "TooManyConnections", "TokensExhausted", "TooManyLeases",
    "PreconditionFailed", "MapFull", "KeyCollision", "DiskFull",
    "UpstreamFailed", "UpstreamOutcomeUnknown", "FenceHeld",
    "StorageFailure", "FenceStoreUnavailable", "StoreError", "Internal",
    "UnverifiedToken", "ElectionUnavailable", "FenceElected",
    "IdempotencyKeyReused", "EffectInProgress", "EffectOutcomeUnknown",
    "MissingEffectHeader",
]

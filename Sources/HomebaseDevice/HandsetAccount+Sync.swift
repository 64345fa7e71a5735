import HomebaseCore
import HomebaseNode
import HomebaseRouter

/// What the handset does with its siblings' sync_delta traffic (Protocol/messages.md §3, §4): the Homebase's
/// adverts and the synced model choice.
extension HandsetAccount {
    /// Stores an `advert` from a roster device with the `homebase` role, after `Ed25519AdvertVerifier` checked
    /// it against the sender's key (replays, by `seq`, are refused by the store).
    ///
    /// - Returns: whether the advert was stored.
    @discardableResult
    public func receiveAdvert(_ blob: SignedBlob, from sender: PublicKey, into store: ExternalModelsAdvertStore)
        -> Bool
    {
        guard self.homebaseDevices.contains(sender),
            let advert = Ed25519AdvertVerifier.verify(blob, from: sender)
        else { return false }
        return (try? store.accept(advert)) ?? false
    }

    /// Applies a sibling's `settings.model_choice` without sending it on (no echo loops).
    ///
    /// - Returns: whether it was applied (only roster siblings are heard).
    @discardableResult
    public func receiveModelChoice(_ choice: ModelChoice, from sender: PublicKey, settings: AgentSettings) -> Bool {
        guard self.siblings.contains(sender) else { return false }
        return (try? settings.apply(remote: choice)) != nil
    }

    /// Records a choice made on this device and sends it, stored, to every sibling.
    ///
    /// - Returns: how many siblings the relay accepted it for (delivered or stored).
    @discardableResult
    public func chooseAndFanOut(_ choice: ModelChoice, settings: AgentSettings, messenger: any PeerMessenger) async
        throws -> Int
    {
        let outbound = try settings.choose(local: choice)
        var reached = 0
        for sibling in self.siblings {
            let outcome = await messenger.sendAndWait(.modelChoice(outbound.choice), to: sibling,
                                                      channel: .sibling, store: true)
            if !outcome.isFailure { reached += 1 }
        }
        return reached
    }
}
